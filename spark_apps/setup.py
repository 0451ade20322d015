"""The dependencies, pinned to ordo's other distributions of the same VERSION (the link to
../VERSION; in an sdist the file itself): the Spark source ships with the SDK of its own release."""

from pathlib import Path

from setuptools import setup

VERSION = (Path(__file__).parent / "VERSION").read_text().strip()

setup(install_requires=[f"ordo-kafka=={VERSION}", "pyspark>=4.0,<5", "pyarrow>=15", "pandas>=2.2,<3"])
