"""Only the optional C accelerator of OrderedProducer.produce; everything else is in pyproject.toml.

``optional=True``: without a C compiler the build goes on and the pure-Python path serves.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("ordo._fastproduce", ["sdk/ordo/_fastproduce.c"], optional=True)])
