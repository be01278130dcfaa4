"""`pip install . --no-build-isolation` builds the pipesched Python module from this clone.

Needs, from Debian: python3-pybind11 (pybind11's setup helpers, pulls pybind11-dev),
python3-dev, python3-setuptools, python3-pip, g++, nlohmann-json3-dev. Nothing is downloaded.
The same sources build with CMake (-DPIPESCHED_PYTHON=ON); see README.md, section Python.
"""

import os
import re
from glob import glob

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))


def version():
    """PIPESCHED_VERSION_{MAJOR,MINOR,PATCH} from include/pipesched/version.hpp (one place)."""
    with open(os.path.join(HERE, "include", "pipesched", "version.hpp")) as f:
        text = f.read()
    parts = [re.search(r"#define PIPESCHED_VERSION_%s (\d+)" % k, text).group(1)
             for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


# The binding files compile in parallel (PIPESCHED_BUILD_JOBS, default 2).
ParallelCompile("PIPESCHED_BUILD_JOBS", default=2).install()

setup(
    name="pipesched",
    version=version(),
    description="Pipeline-parallel training schedules: generate, check, simulate",
    license="Apache-2.0",
    python_requires=">=3.8",
    packages=["pipesched"],
    package_dir={"": "python"},
    package_data={"pipesched": ["__init__.pyi", "py.typed"]},
    ext_modules=[
        # With the compiled library's sources (src/), as the CMake build links
        # pipesched::pipesched: the binding files see the heavy entry points declared only.
        Pybind11Extension(
            "pipesched._pipesched",
            sorted(glob("python/src/*.cpp")) + sorted(glob("src/*.cpp")),
            include_dirs=["include"],
            cxx_std=20,
        )
    ],
    cmdclass={"build_ext": build_ext},
    extras_require={"numpy": ["numpy"]},
    # Out of the way of CMake's build/ directories.
    options={"build": {"build_base": "build-python"}},
    zip_safe=False,
)
