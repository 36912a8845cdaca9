"""Conan 2 recipe for the mosaicrt OpenVINO execution provider (a plugin EP shared library).

``conan create recipes/ep-openvino -pr:h recipes/profiles/linux-x86_64`` packages the plugin
library; the pipeline runs ``conan install`` on it for the target's CMake toolchain. The version is
read from ``eps/openvino/VERSION``. OpenVINO is not a conan requirement: the build reads the C
headers of the ``openvino`` wheel of the building Python (or OPENVINO_INCLUDE_DIR,
OPENVINO_C_LIBRARY and OPENVINO_RELEASE given in the profile's
``tools.cmake.cmaketoolchain:extra_variables``), and the library loads OpenVINO at run time.
"""

import os

from conan import ConanFile
from conan.errors import ConanInvalidConfiguration
from conan.tools.cmake import CMake, CMakeToolchain
from conan.tools.files import copy, load

_EXCLUDES = ("build/*", "dist/*", "*/__pycache__/*", "*.pyc", "*.egg-info/*")


class MosaicrtEpOpenvinoConan(ConanFile):
    name = "mosaicrt-ep-openvino"
    package_type = "shared-library"
    license = "MIT"
    description = "mosaicrt OpenVINO execution provider (OpenVINOExecutionProvider), a plugin EP library"
    topics = ("onnx", "inference", "openvino", "execution-provider")
    settings = "os", "arch", "compiler", "build_type"

    def _repo_dir(self):
        return os.path.join(self.recipe_folder, "..", "..")

    def set_version(self):
        self.version = load(self, os.path.join(self._repo_dir(), "eps", "openvino", "VERSION")).strip()

    def export_sources(self):
        repo = self._repo_dir()
        dst = self.export_sources_folder
        copy(self, "*", src=os.path.join(repo, "eps", "openvino"), dst=os.path.join(dst, "eps", "openvino"),
             excludes=_EXCLUDES)
        copy(self, "*.h", src=os.path.join(repo, "core", "include"), dst=os.path.join(dst, "core", "include"))

    def validate(self):
        if self.settings.os != "Linux" or self.settings.arch != "x86_64":
            raise ConanInvalidConfiguration("the OpenVINO EP is built for Linux x86_64")
        if str(self.settings.get_safe("compiler.cppstd")) in ("98", "gnu98", "11", "gnu11", "14", "gnu14"):
            raise ConanInvalidConfiguration("mosaicrt-ep-openvino needs C++17 or newer")

    def layout(self):
        self.folders.source = "eps/openvino"
        self.folders.build = "build"
        self.folders.generators = "build/generators"

    def generate(self):
        CMakeToolchain(self).generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def package(self):
        cmake = CMake(self)
        cmake.install()
        share = os.path.join(self.package_folder, "share", "mosaicrt-ep-openvino")
        copy(self, "VERSION", src=self.source_folder, dst=share)

    def package_info(self):
        self.cpp_info.libs = []  # a plugin: loaded at run time, never linked
        self.cpp_info.bindirs = ["lib"]
        self.runenv_info.define_path("MOSAICRT_EP_OPENVINO_LIBRARY",
                                     os.path.join(self.package_folder, "lib", "libmosaicrt_ep_openvino.so"))
