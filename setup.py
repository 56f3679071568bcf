"""Build the executorch wheel; the component table in tools/packaging/components.py decides its contents.

EXECUTORCH_BUILD_MINIMAL=1 builds the pure-Python export-only wheel; unset, the full wheel with
the native runtime built by CMake, for this machine or (EXECUTORCH_TARGET_ARCH=aarch64) cross-compiled
for 64-bit Arm. See README.md, "Wheels".
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from setuptools import setup  # noqa: E402

from tools.packaging.commands import commands_for, distribution_for  # noqa: E402
from tools.packaging.mode import BuildConfigError, mode_from_env  # noqa: E402
from tools.packaging.plan import plan  # noqa: E402
from tools.packaging.reproducible import default_source_date_epoch  # noqa: E402
from tools.packaging.target import target_from_env  # noqa: E402

try:
    PLAN = plan(ROOT, mode_from_env(), target_from_env())
except BuildConfigError as err:
    sys.exit(f"error: {err}")

os.environ["SOURCE_DATE_EPOCH"] = default_source_date_epoch(ROOT)

setup(
    distclass=distribution_for(PLAN),
    cmdclass=commands_for(PLAN),
    package_dir={"executorch": "."},
    packages=list(PLAN.packages),
    package_data=PLAN.package_data,
    include_package_data=False,
    install_requires=list(PLAN.install_requires),
    extras_require=PLAN.extras_require,
    entry_points=PLAN.entry_points,
    zip_safe=False,
    # Not setuptools' default build/: a directory of that name in the checkout would shadow pypa's
    # `build` package for `python -m build` run from here.
    options={"build": {"build_base": "build-setuptools"}},
)
