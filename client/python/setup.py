"""Builds the pkserve package: the sources here plus the gRPC stubs of proto/pkserve/v1/pkserve.proto,
generated at build time with grpc_tools (Debian: python3-grpc-tools) into the build's pkserve/v1/,
so that the installed stubs always match the proto of the tree they were built from.

The proto is found at ../../proto (this folder's place in the pkserve tree), or where the
PKSERVE_PROTO_ROOT environment variable points.
"""
import os
import pathlib

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
PROTO_FILE = "pkserve/v1/pkserve.proto"


def proto_root():
    root = pathlib.Path(os.environ.get("PKSERVE_PROTO_ROOT", HERE.parent.parent / "proto"))
    if not (root / PROTO_FILE).is_file():
        raise SystemExit(f"pkserve: {root / PROTO_FILE} not found; set PKSERVE_PROTO_ROOT to the "
                         "folder that holds pkserve/v1/pkserve.proto")
    return root


def generate_stubs(root, out_dir):
    """Writes pkserve/v1/pkserve_pb2.py, pkserve_pb2_grpc.py and __init__.py under out_dir."""
    try:
        from grpc_tools import protoc
    except ImportError as error:
        raise SystemExit("pkserve: generating the stubs needs grpc_tools (Debian: "
                         "python3-grpc-tools)") from error
    out_dir.mkdir(parents=True, exist_ok=True)
    args = ["grpc_tools.protoc", f"-I{root}", f"--python_out={out_dir}",
            f"--grpc_python_out={out_dir}", str(root / PROTO_FILE)]
    if protoc.main(args) != 0:
        raise SystemExit(f"pkserve: grpc_tools.protoc failed on {root / PROTO_FILE}")
    (out_dir / "pkserve" / "v1" / "__init__.py").write_text(
        '"""Stubs generated from proto/pkserve/v1/pkserve.proto at build time."""\n')


class BuildPyWithStubs(build_py):
    """build_py that also generates the stubs into the build directory (never the source tree)."""

    def run(self):
        super().run()
        generate_stubs(proto_root(), pathlib.Path(self.build_lib))

    def find_package_modules(self, package, package_dir):
        # pkserve.v1 has no sources here: its modules are the generated ones.
        if package == "pkserve.v1":
            return []
        return super().find_package_modules(package, package_dir)

    def check_package(self, package, package_dir):
        if package == "pkserve.v1":
            return None
        return super().check_package(package, package_dir)


setup(packages=["pkserve", "pkserve.v1"], include_package_data=False,
      cmdclass={"build_py": BuildPyWithStubs})
