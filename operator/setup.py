"""The dependencies, pinned to ordo's other distributions of the same VERSION (the link to
../VERSION; in an sdist the file itself): the operator ships with the SDK of its own release."""

from pathlib import Path

from setuptools import setup

VERSION = (Path(__file__).parent / "VERSION").read_text().strip()

setup(
    install_requires=[
        f"ordo-kafka[group]=={VERSION}",
        "kubernetes>=31,<38",
        "kopf>=1.45,<2",
        "prometheus-client>=0.20,<1",
    ]
)
