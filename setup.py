"""Packaging for the carbon stack reimplementation."""

from setuptools import find_packages, setup

setup(
    name="carbon-fast",
    version="1.1.10",
    description="A fast, drop-in reimplementation of Graphite's Carbon daemons and render API",
    packages=find_packages(include=["carbon", "carbon.*", "webapp", "webapp.*"]),
    python_requires=">=3.9",
    install_requires=[
        "twisted>=22.10",
        "whisper==1.1.10",
        "cachetools>=5",
        "mmh3>=4",
        "tzdata",
    ],
    extras_require={
        "render": ["matplotlib>=3.7", "numpy"],
        "test": ["pytest>=7", "pytest-timeout", "hypothesis>=6", "ruff", "matplotlib>=3.7",
                 "numpy", "pillow"],
    },
    entry_points={
        "console_scripts": [
            "carbon-cache.py = carbon.daemon.cli:cache_main",
            "carbon-relay.py = carbon.daemon.cli:relay_main",
            "carbon-aggregator.py = carbon.daemon.cli:aggregator_main",
            "carbon-aggregator-cache.py = carbon.daemon.cli:aggregator_cache_main",
            "graphite-render = webapp.server:main",
        ],
    },
)
