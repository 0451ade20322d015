"""The dependencies, pinned to ordo's other distributions of the same VERSION (the link to
../VERSION; in an sdist the file itself): the harness drives the SDK and operator of its release."""

from pathlib import Path

from setuptools import setup

VERSION = (Path(__file__).parent / "VERSION").read_text().strip()

setup(
    install_requires=[
        f"ordo-kafka[group,cli]=={VERSION}",  # GroupProducer members, and the command the harness extends
        f"ordo-kafka-operator=={VERSION}",  # the sandbox and the tests run the operator as a process
        # kio decodes requests for the Kafka fault proxy; cryptography makes the API server's certificates
        "kio>=0.6.5,<0.7",
        "aiohttp>=3.9,<4",
        "cryptography>=42",
        "pytest>=8,<10",  # the fixtures
    ]
)
