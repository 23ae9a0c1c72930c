"""Builds and installs the keyer package from the repository (no network needed):

    python3 -m pip install ./python                  # in a virtual environment, or
    python3 -m pip install --break-system-packages ./python   # Debian's python3 system-wide

The extension is built by keyer's own CMake build (target keyer_python) for the Python
running pip: in the build directory named by $KEYER_BUILD_DIR, default build/ at the
repository root, configured first (CPU only unless configured otherwise) when it does not
exist yet, and pointed at this interpreter (KEYER_PYTHON) when it does. The installed
package reads the models from the repository's models/ (or $KEYER_MODELS_DIR).
"""
import glob
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.path.abspath(os.environ.get("KEYER_BUILD_DIR", os.path.join(REPO, "build")))
        configure = ["cmake", "-S", REPO, "-B", build, "-DKEYER_PYTHON=" + sys.executable]
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            configure.append("-DCMAKE_BUILD_TYPE=Release")
        subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", build, "--target", "keyer_python",
                               "-j", os.environ.get("KEYER_BUILD_JOBS", "2")])
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = glob.glob(os.path.join(build, "python", "keyer", "_keyer" + suffix))
        if not built:
            raise RuntimeError("the keyer build made no extension in %s/python/keyer" % build)
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built[0], dest)


setup(
    name="keyer",
    version="0.1.0",
    description="AI video effects (person segmentation, background blur and replacement)",
    packages=["keyer"],
    package_dir={"keyer": "keyer"},
    package_data={"keyer": ["py.typed"]},
    ext_modules=[Extension("keyer._keyer", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    install_requires=["numpy"],
    zip_safe=False,
)
