"""Packaging for the carbon stack reimplementation.

The C accelerators in ``NATIVE`` are optional: each is built when a C compiler and the
Python headers are present, and the pure-Python code it mirrors is used otherwise (set
CARBON_REQUIRE_NATIVE=1 to make a failed build an error, as the test setup does).
"""

import glob
import os

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

NATIVE = [
    Extension("carbon.formats._plaintext", ["carbon/formats/_plaintext.c"],
              depends=["carbon/formats/_number.h"]),
    Extension("carbon.aggregator._staging", ["carbon/aggregator/_staging.c"]),
    Extension("carbon.storage._whisper_create", ["carbon/storage/_whisper_create.c"],
              depends=["carbon/storage/_fileio.h"]),
    Extension("carbon.storage._whisper_writer", ["carbon/storage/_whisper_writer.c"],
              depends=["carbon/storage/_fileio.h"]),
    Extension("carbon.cache._store", ["carbon/cache/_store.c"],
              depends=["carbon/cache/_point_form.h"]),
    Extension("carbon.cache._journal", ["carbon/cache/_journal.c"],
              depends=["carbon/formats/_lines.h", "carbon/formats/_number.h",
                       "carbon/cache/_point_form.h"]),
    Extension("carbon.formats._pickled", ["carbon/formats/_pickled.c"]),
    Extension("carbon.relay._route", ["carbon/relay/_route.c"],
              depends=["carbon/formats/_lines.h", "carbon/formats/_number.h"]),
    Extension("webapp.render._rows", ["webapp/render/_rows.c"]),
    Extension("webapp.storage._points", ["webapp/storage/_points.c"]),
]


class OptionalBuildExt(build_ext):
    """Build each accelerator on its own; one that cannot be built is skipped."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # no compiler at all
            self._skipped("the C accelerators", exc)

    def build_extension(self, ext):
        if not all(os.path.exists(source) for source in ext.sources):
            return self._skipped(ext.name, "source missing")
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._skipped(ext.name, exc)

    @staticmethod
    def _skipped(what, why):
        if os.environ.get("CARBON_REQUIRE_NATIVE"):
            raise SystemExit("error: %s not built: %s" % (what, why))
        print("warning: %s not built (%s); the pure-Python code is used" % (what, why))

setup(
    name="carbon-fast",
    version="1.1.10",
    description="A fast, drop-in reimplementation of Graphite's Carbon daemons and render API",
    packages=find_packages(include=["carbon", "carbon.*", "webapp", "webapp.*"]),
    # What CI runs: the suite on 3.11 (Debian 12's) and on Debian 13's 3.13 in a chroot
    # (tools/test.sh, tools/test-py313.sh); 3.12 lies between them, 3.14 is untested.
    python_requires=">=3.11, <3.14",
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3 :: Only",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.13",
        "Programming Language :: Python :: Implementation :: CPython",
        "Operating System :: POSIX :: Linux",
    ],
    ext_modules=NATIVE,
    # the systemd units and the shipped conf/ that `carbon-fast install-layout` installs
    package_data={"carbon.deploy": ["systemd/*"]},
    data_files=[("share/carbon-fast/conf", sorted(glob.glob("conf/*")))],
    cmdclass={"build_ext": OptionalBuildExt},
    install_requires=[
        "twisted>=22.10",
        "whisper==1.1.10",
        "mmh3>=4",
        "tzdata",
        "txamqp>=0.8.2",
        "tomli>=1.1; python_version < '3.11'",  # playground scenarios (tomllib before 3.11)
    ],
    extras_require={
        "render": ["matplotlib>=3.7", "numpy", "orjson>=3.9"],
        "playground": ["matplotlib>=3.7", "numpy"],
        "manhole": ["twisted[conch]"],
        "test": ["pytest>=7", "pytest-timeout", "hypothesis>=6", "ruff", "mypy>=1.11",
                 "matplotlib>=3.7", "numpy", "pillow", "twisted[conch]", "orjson>=3.9"],
    },
    entry_points={
        "console_scripts": [
            "carbon-cache.py = carbon.daemon.cli:cache_main",
            "carbon-relay.py = carbon.daemon.cli:relay_main",
            "carbon-aggregator.py = carbon.daemon.cli:aggregator_main",
            "carbon-aggregator-cache.py = carbon.daemon.cli:aggregator_cache_main",
            "carbon-config = carbon.daemon.check:main",
            "graphite-render = webapp.server:main",
            "carbon-playground = carbon.playground.cli:main",
            "carbon-cluster = carbon.cluster.cli:main",
            "carbon-resize = carbon.cluster.resize:main",
            "carbon-fast = carbon.deploy.cli:main",
        ],
        "carbon.routers": [
            "cluster-rebalance = carbon.cluster.router:RebalancingRouter",
        ],
    },
)
