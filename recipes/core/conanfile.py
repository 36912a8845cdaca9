"""Conan 2 recipe for the mosaicrt core (C ABI shared library + public headers).

C/C++ consumers: ``conan create recipes/core -pr:h recipes/profiles/<target>``.
The pipeline also runs ``conan install`` on this recipe to get the CMake toolchain for a
target (``conan_toolchain.cmake``) before building the wheel. The version is read from
``core/VERSION`` — the single source shared with CMake and the wheel metadata.
"""

import os

from conan import ConanFile
from conan.errors import ConanInvalidConfiguration
from conan.tools.cmake import CMake, CMakeToolchain
from conan.tools.files import copy, load

_EXCLUDES = ("build/*", "dist/*", "*/__pycache__/*", "*.pyc", "*.egg-info/*")


class MosaicrtCoreConan(ConanFile):
    name = "mosaicrt"
    package_type = "shared-library"
    license = "MIT"
    description = "mosaicrt runtime core: ONNX inference with a C ABI and the CPU execution provider"
    topics = ("onnx", "inference", "runtime")
    settings = "os", "arch", "compiler", "build_type"

    def _core_dir(self):
        return os.path.join(self.recipe_folder, "..", "..", "core")

    def set_version(self):
        self.version = load(self, os.path.join(self._core_dir(), "VERSION")).strip()

    def export_sources(self):
        copy(self, "*", src=self._core_dir(), dst=self.export_sources_folder, excludes=_EXCLUDES)

    def validate(self):
        if self.settings.os == "Macos" and self.settings.arch == "x86_64":
            raise ConanInvalidConfiguration("macOS x86_64 is not supported (policy); use arch=armv8")
        if str(self.settings.get_safe("compiler.cppstd")) in ("98", "gnu98", "11", "gnu11", "14", "gnu14"):
            raise ConanInvalidConfiguration("mosaicrt needs C++17 or newer")

    def layout(self):
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
        copy(self, "VERSION", src=self.source_folder, dst=os.path.join(self.package_folder, "share", "mosaicrt"))

    def package_info(self):
        self.cpp_info.libs = ["mosaicrt"]
        self.cpp_info.set_property("cmake_file_name", "mosaicrt")
        self.cpp_info.set_property("cmake_target_name", "mosaicrt::mosaicrt")
        if self.settings.os == "Linux":
            self.cpp_info.system_libs = ["pthread", "dl"]
