"""Only the optional C accelerators (OrderedProducer.produce's common case, GatedConsumer's look
at a fetched batch); everything else is in pyproject.toml.

``optional=True``: without a C compiler the build goes on and the pure-Python paths serve.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ordo._fastproduce", ["sdk/ordo/_fastproduce.c"], depends=["sdk/ordo/_murmur2.h"], optional=True
        ),
        Extension("ordo._fastscan", ["sdk/ordo/_fastscan.c"], depends=["sdk/ordo/_murmur2.h"], optional=True),
    ]
)
