"""Build the native core (native/) into posenc/native/libposenc.so during `pip install`, and
its CPython binding posenc/native/_posenc (native/python/_posenc.c) linked against it.

Plain C11 with the compiler Python was configured with: no system packages. The library has
no Python in it (posenc.native loads it with ctypes, the C binary server links the same code);
the binding adds the Python headers and calls the library's kernels at a fraction of a ctypes
call's cost, so a process that computes or serves never needs numba. Both builds are optional:
without a working compiler (or without the Python headers, for the binding) the package still
installs and runs on its numba kernels (`posenc info` says which run).
"""

import os
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# Every C file of native/src (the ISA-specific ones compile to nothing off x86-64).
NATIVE = Path(__file__).parent / "native"
SOURCES = sorted(path.name for path in NATIVE.joinpath("src").glob("*.c"))
# The headers the sources include (kernel bodies, SIMD wrappers, the CRC): an edit to one alone
# must rebuild the library, which setuptools does only for the files named here.
HEADERS = sorted(f"native/{p.parent.name}/{p.name}" for d in ("src", "include") for p in NATIVE.joinpath(d).glob("*.h"))


class SharedLibrary(Extension):
    """A plain shared library: named lib<name>.so, no PyInit_ symbol, no libpython."""


class BuildExt(build_ext):
    def build_extension(self, ext):
        if ext is binding:  # link against the libposenc.so just built, found beside it at run time
            ext.library_dirs = [os.path.dirname(self.get_ext_fullpath(native_core.name))]
        super().build_extension(ext)

    def get_ext_filename(self, fullname):
        if isinstance(self.ext_map.get(fullname), SharedLibrary):
            *package, name = fullname.split(".")
            return os.path.join(*package, f"lib{name}.so")
        return super().get_ext_filename(fullname)

    def get_export_symbols(self, ext):
        return ext.export_symbols if isinstance(ext, SharedLibrary) else super().get_export_symbols(ext)

    def get_libraries(self, ext):
        return ext.libraries if isinstance(ext, SharedLibrary) else super().get_libraries(ext)


native_core = SharedLibrary(
    "posenc.native.posenc",  # -> posenc/native/libposenc.so
    sources=[f"native/src/{name}" for name in SOURCES],
    include_dirs=["native/include", "native/src"],
    depends=HEADERS,
    libraries=["m"],
    # FMA only where the kernels ask for it, so results do not depend on compiler whims
    extra_compile_args=["-std=c11", "-O3", "-fvisibility=hidden", "-ffp-contract=off"],
    optional=True,
)

binding = Extension(
    "posenc.native._posenc",
    sources=["native/python/_posenc.c"],
    include_dirs=["native/include"],
    depends=HEADERS,
    libraries=["posenc", "m"],
    runtime_library_dirs=["$ORIGIN"],
    extra_compile_args=["-std=c11", "-O2", "-fvisibility=hidden", "-ffp-contract=off"],
    optional=True,
)

setup(ext_modules=[native_core, binding], cmdclass={"build_ext": BuildExt})
