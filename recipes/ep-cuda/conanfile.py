"""Conan 2 recipe for the mosaicrt CUDA execution provider (a plugin EP shared library).

C/C++ consumers: ``conan create recipes/ep-cuda -pr:h recipes/profiles/linux-x86_64``.
The version is read from ``eps/cuda/VERSION`` (shared with CMake and the wheel metadata).

The CUDA toolkit is not a Conan package: CMake finds nvcc in NVIDIA's PyPI toolkit wheels
importable by ``python3`` (``pip install nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-cccl
nvidia-cublas``), or in the folder given by ``-c user.mosaicrt:cuda_root=<dir with bin/nvcc>``.
The EP ABI header (``mosaicrt/ep.h``) is exported from ``core/include`` with the sources; the
plugin does not link the core library, so it does not require the ``mosaicrt`` package.
"""

import os

from conan import ConanFile
from conan.errors import ConanInvalidConfiguration
from conan.tools.cmake import CMake, CMakeToolchain
from conan.tools.files import copy, load

_EXCLUDES = ("build/*", "dist/*", "*/__pycache__/*", "*.pyc", "*.egg-info/*")
_INCLUDE_DIR = "mosaicrt_include"  # where core/include lands inside the exported sources


class MosaicrtEpCudaConan(ConanFile):
    name = "mosaicrt-ep-cuda"
    package_type = "shared-library"
    license = "MIT"
    description = "mosaicrt CUDA execution provider: plugin EP for NVIDIA GPUs (CUDA runtime + cuBLAS)"
    topics = ("onnx", "inference", "cuda", "execution-provider")
    settings = "os", "arch", "compiler", "build_type"
    options = {"cuda_architectures": ["ANY"]}  # noqa: RUF012 (conan reads class attributes)
    default_options = {"cuda_architectures": "default"}  # noqa: RUF012

    def _repo_dir(self):
        return os.path.join(self.recipe_folder, "..", "..")

    def set_version(self):
        self.version = load(self, os.path.join(self._repo_dir(), "eps", "cuda", "VERSION")).strip()

    def export_sources(self):
        repo = self._repo_dir()
        copy(self, "*", src=os.path.join(repo, "eps", "cuda"), dst=self.export_sources_folder, excludes=_EXCLUDES)
        copy(self, "*.h", src=os.path.join(repo, "core", "include"),
             dst=os.path.join(self.export_sources_folder, _INCLUDE_DIR))  # fmt: skip

    def validate(self):
        if self.settings.os != "Linux" or str(self.settings.arch) not in ("x86_64", "armv8"):
            raise ConanInvalidConfiguration("the CUDA EP is built for Linux x86_64 and aarch64 only")
        if str(self.settings.get_safe("compiler.cppstd")) in ("98", "gnu98", "11", "gnu11", "14", "gnu14"):
            raise ConanInvalidConfiguration("the CUDA EP needs C++17 or newer")

    def layout(self):
        self.folders.build = "build"
        self.folders.generators = "build/generators"

    def generate(self):
        tc = CMakeToolchain(self)
        tc.cache_variables["MOSAICRT_INCLUDE_DIR"] = os.path.join(self.source_folder, _INCLUDE_DIR)
        cuda_root = self.conf.get("user.mosaicrt:cuda_root")
        if cuda_root:
            tc.cache_variables["MOSAICRT_CUDA_ROOT"] = str(cuda_root)
        if str(self.options.cuda_architectures) != "default":
            tc.cache_variables["MOSAICRT_CUDA_ARCHITECTURES"] = str(self.options.cuda_architectures)
        tc.generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def package(self):
        cmake = CMake(self)
        cmake.install()
        copy(self, "VERSION", src=self.source_folder,
             dst=os.path.join(self.package_folder, "share", "mosaicrt-ep-cuda"))  # fmt: skip

    def package_info(self):
        # A plugin is dlopen()ed by the core, never linked: expose its folder, no libs to link.
        self.cpp_info.libs = []
        self.cpp_info.libdirs = ["lib"]
        self.cpp_info.includedirs = []
        self.cpp_info.set_property("cmake_file_name", "mosaicrt-ep-cuda")
