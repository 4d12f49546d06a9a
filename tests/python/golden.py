"""Reads tests/data/golden_cases.bin (format: tests/data/README.md) into GoldenCase records."""
import dataclasses
import struct

import numpy as np


@dataclasses.dataclass
class GoldenCase:
    name: str
    bfloat16: bool
    widths: list
    k: int
    rows: int
    kk: int
    scores: np.ndarray  # [rows, sum(widths)], float32 or uint16 bfloat16 patterns
    values: np.ndarray  # [rows, kk], the same element type
    slots: np.ndarray   # [rows, kk] int64


def read_golden(path):
    with open(path, "rb") as file:
        data = file.read()
    magic, version, count = struct.unpack_from("<4sII", data, 0)
    if magic != b"PKTK" or version != 1:
        raise ValueError(f"{path}: not a version 1 PKTK file")
    at = 12
    cases = []
    for _ in range(count):
        dtype, factors, _, k, rows = struct.unpack_from("<BBHII", data, at)
        at += 12
        widths = list(struct.unpack_from("<4I", data, at))[:factors]
        at += 16
        kk, name_length = struct.unpack_from("<II", data, at)
        at += 8
        name = data[at:at + name_length].decode()
        at += name_length
        element = np.dtype("<u2") if dtype == 1 else np.dtype("<f4")
        width = sum(widths)

        def take(count, of_type):
            nonlocal at
            array = np.frombuffer(data, dtype=of_type, count=count, offset=at)
            at += count * of_type.itemsize
            return array

        scores = take(rows * width, element).reshape(rows, width)
        values = take(rows * kk, element).reshape(rows, kk)
        slots = take(rows * kk, np.dtype("<i8")).reshape(rows, kk)
        cases.append(GoldenCase(name, dtype == 1, widths, k, rows, kk, scores, values, slots))
    return cases
