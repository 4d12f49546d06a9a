"""Lookups of hosted memories and pkserve.torch.RemoteMemory, against the pure-PyTorch reference
layer (reference_layer.py), the server's own top-k, and the C++ client's bytes.

The memories are files written here (memory_files.py) and served with --memory. Where this
build's pkserve does not serve memories (it exits at start on the unknown flag, or answers Lookup
UNIMPLEMENTED), the tests that need them skip and say which.
"""
import asyncio
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed")

import pkserve  # noqa: E402
import pkserve.torch  # noqa: E402
from conftest import Server, ServerExited  # noqa: E402
from memory_files import write_safetensors  # noqa: E402
from reference_layer import assert_within_rounding, magnitude_bound, reference_lookup  # noqa: E402

DIM = 16
MEMORIES = {  # name: (widths, bfloat16 values)
    "m32": ([64, 64], False),
    "mbf": ([64, 64], True),
    "m3": ([16, 16, 16], False),
}


def memory_values(name):
    widths, bfloat16 = MEMORIES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    values = rng.standard_normal((int(np.prod(widths)), DIM), dtype=np.float32)
    return pkserve.float32_to_bfloat16_bits(values) if bfloat16 else values


def values_tensor(name):
    values = memory_values(name)
    if values.dtype == np.uint16:
        values = pkserve.bfloat16_bits_to_float32(values)
    return torch.from_numpy(values)


def tie_free_bfloat16_scores(rows, seed):
    """bfloat16 score rows for widths [64, 64] whose 4096 pair sums are all distinct: factor 0
    a permutation of 0.5 x (0..63), factor 1 of (0..63) / 128 (every value exact in bfloat16,
    every sum exact in float32)."""
    rng = np.random.default_rng(seed)
    scores = np.empty((rows, 128), np.float32)
    for row in range(rows):
        scores[row, :64] = rng.permutation(64) * 0.5 - 16.0
        scores[row, 64:] = rng.permutation(64) / 128.0
    return pkserve.float32_to_bfloat16_bits(scores)


def normal_scores(rows, widths, seed):
    return np.random.default_rng(seed).standard_normal((rows, sum(widths)), dtype=np.float32)


@pytest.fixture(scope="module")
def memory_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("memories")
    flags = []
    for name, (widths, _) in MEMORIES.items():
        path = folder / f"{name}.safetensors"
        write_safetensors(path, memory_values(name), widths)
        flags.append(f"--memory={name}={path}")
    try:
        running = Server(flags)
    except ServerExited as exited:
        unknown = [line for line in str(exited).splitlines() if "Unknown command line flag" in line]
        if unknown and "memory" in unknown[0]:
            pytest.skip(f"pkserve of this build does not serve memories: it exits at start with "
                        f"'{unknown[0].strip()}'")
        raise
    with pkserve.Client(running.target) as client:
        try:
            client.lookup("m32", normal_scores(1, [64, 64], seed=0), 4)
        except pkserve.Unimplemented as error:
            running.close()
            pytest.skip(f"the server answers Lookup UNIMPLEMENTED ({error.message!r})")
    yield running
    running.close()


@pytest.fixture(scope="module")
def client(memory_server):
    with pkserve.Client(memory_server.target) as client:
        yield client


def test_the_reference_layer_selects_the_servers_top_k(server):
    """Checks the oracle itself against this build's top-k (runs without memory support)."""
    with pkserve.Client(server.target) as client:
        for widths, k, scores in (([64, 64], 64, normal_scores(50, [64, 64], seed=1)),
                                  ([16, 16, 16], 32, normal_scores(50, [16, 16, 16], seed=2)),
                                  ([64, 64], 64, tie_free_bfloat16_scores(50, seed=3))):
            slots, _ = client.topk(scores, widths, k)
            if scores.dtype == np.uint16:
                scores = pkserve.bfloat16_bits_to_float32(scores)
            _, reference_slots, weights = reference_lookup(
                torch.from_numpy(scores), widths, k, torch.zeros(int(np.prod(widths)), 1))
            np.testing.assert_array_equal(slots.astype(np.int64), reference_slots.numpy())
            np.testing.assert_allclose(weights.sum(dim=1).numpy(), 1.0, rtol=1e-12)


def test_the_server_lists_its_memories(client):
    memories = {memory.name: memory for memory in client.info().memories}
    for name, (widths, bfloat16) in MEMORIES.items():
        memory = memories[name]
        assert list(memory.factor_widths) == widths
        assert memory.slots == np.prod(widths) and memory.dim == DIM
        assert memory.dtype == (pkserve.v1.pkserve_pb2.DTYPE_BFLOAT16 if bfloat16
                                else pkserve.v1.pkserve_pb2.DTYPE_FLOAT32)


@pytest.mark.parametrize("heads", [1, 2, 4])
@pytest.mark.parametrize("k", [1, 16, 64])
def test_float32_lookup_matches_the_reference_layer(client, heads, k):
    scores = normal_scores(64, [64, 64], seed=k * 10 + heads)
    outputs = client.lookup("m32", scores, k, heads)
    assert outputs.dtype == np.float32 and outputs.shape == (64 // heads, DIM)
    expect, slots, weights = reference_lookup(torch.from_numpy(scores), [64, 64], k,
                                              values_tensor("m32"), heads)
    bound = magnitude_bound(slots, weights, values_tensor("m32"), heads)
    assert_within_rounding(torch.from_numpy(outputs).double(), expect, bound,
                           heads * slots.shape[1], False)


def test_three_factor_lookup_matches_the_reference_layer(client):
    scores = normal_scores(40, [16, 16, 16], seed=5)
    outputs = client.lookup("m3", scores, 32, 2)
    expect, slots, weights = reference_lookup(torch.from_numpy(scores), [16, 16, 16], 32,
                                              values_tensor("m3"), 2)
    assert_within_rounding(torch.from_numpy(outputs).double(), expect,
                           magnitude_bound(slots, weights, values_tensor("m3"), 2),
                           2 * slots.shape[1], False)


@pytest.mark.parametrize("output_dtype", [None, "float32"])
def test_bfloat16_lookup_matches_the_reference_layer(client, output_dtype):
    bits = tie_free_bfloat16_scores(32, seed=6)
    outputs = client.lookup("mbf", bits, 64, 2, output_dtype=output_dtype)
    bfloat16_output = output_dtype is None
    assert outputs.dtype == (np.uint16 if bfloat16_output else np.float32)
    got = pkserve.bfloat16_bits_to_float32(outputs) if bfloat16_output else outputs
    scores = torch.from_numpy(pkserve.bfloat16_bits_to_float32(bits))
    expect, slots, weights = reference_lookup(scores, [64, 64], 64, values_tensor("mbf"), 2)
    assert_within_rounding(torch.from_numpy(got).double(), expect,
                           magnitude_bound(slots, weights, values_tensor("mbf"), 2),
                           2 * slots.shape[1], bfloat16_output)


def test_returned_slots_are_the_top_k_and_weights_their_softmax(client):
    scores = normal_scores(30, [64, 64], seed=7)
    outputs, slots, weights = client.lookup("m32", scores, 16, 3, return_slots=True)
    assert outputs.shape == (10, DIM) and slots.shape == (30, 16) and weights.shape == (30, 16)
    topk_slots, _ = client.topk(scores, [64, 64], 16)
    np.testing.assert_array_equal(slots, topk_slots)
    _, _, expect_weights = reference_lookup(torch.from_numpy(scores), [64, 64], 16,
                                            values_tensor("m32"), 3)
    np.testing.assert_allclose(weights, expect_weights.numpy(), rtol=2e-6, atol=1e-9)


def test_lookup_many_keeps_input_order_across_requests(memory_server):
    scores = normal_scores(10_000, [64, 64], seed=8)
    with pkserve.Client(memory_server.target, chunk_rows=998, max_in_flight=4) as client:
        outputs = client.lookup_many("m32", scores, 8, heads=2)
        assert outputs.shape == (5000, DIM)
        for first in range(0, 10_000, 4096):
            np.testing.assert_array_equal(outputs[first // 2:(first + 4096) // 2],
                                          client.lookup("m32", scores[first:first + 4096], 8, 2))
        pieces = list(client.lookup_many("m32", iter([scores[:10], scores[10:3000]]), 8, 2))
    np.testing.assert_array_equal(np.concatenate(pieces), outputs[:1500])


def test_lookup_of_an_unknown_memory_is_not_found(client):
    with pytest.raises(pkserve.NotFound, match="nope"):
        client.lookup("nope", normal_scores(2, [64, 64], seed=9), 4)


def test_async_lookup_answers_as_the_sync_one(memory_server, client):
    scores = normal_scores(300, [64, 64], seed=10)
    expect = client.lookup("m32", scores, 16, 2)

    async def main():
        async with pkserve.AsyncClient(memory_server.target, chunk_rows=64) as aclient:
            return (await aclient.lookup("m32", scores, 16, 2),
                    await aclient.lookup_many("m32", scores, 16, 2))

    one, many = asyncio.run(main())
    np.testing.assert_array_equal(one, expect)
    np.testing.assert_array_equal(many, expect)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_remote_memory_matches_the_reference_layer_in_the_scores_dtype(client, dtype):
    layer = pkserve.torch.RemoteMemory(client, "mbf" if dtype == torch.bfloat16 else "m32",
                                       k=64, heads=2)
    if dtype == torch.bfloat16:
        flat = torch.from_numpy(tie_free_bfloat16_scores(24, seed=11).view(np.int16)).view(dtype)
    else:
        flat = torch.from_numpy(normal_scores(24, [64, 64], seed=11))
    scores = flat.reshape(3, 4, 2, 128)
    with torch.no_grad():
        outputs = layer(scores)
    assert outputs.shape == (3, 4, DIM) and outputs.dtype == dtype
    assert outputs.device == scores.device
    expect, slots, weights = reference_lookup(flat, [64, 64], 64, values_tensor(layer.memory), 2)
    bound = magnitude_bound(slots, weights, values_tensor(layer.memory), 2)
    assert_within_rounding(outputs.reshape(12, DIM).double(), expect, bound,
                           2 * slots.shape[1], dtype == torch.bfloat16)


def test_remote_memory_is_inference_only(client):
    layer = pkserve.torch.RemoteMemory(client, "m32", k=8, heads=1)
    scores = torch.zeros(2, 1, 128, requires_grad=True)
    with pytest.raises(RuntimeError, match="inference only"):
        layer(scores)
    with torch.no_grad():
        assert layer(scores).shape == (2, DIM)
    with pytest.raises(ValueError, match="heads=1"):
        layer(torch.zeros(2, 3, 128))


def cli_lookup_help():
    cli = os.environ.get("PKSERVE_CLI")
    if not cli or not os.path.exists(cli):
        return None, "PKSERVE_CLI is not set or missing"
    done = subprocess.run([cli, "lookup", "--help"], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return None, (f"pkserve-cli of this build has no lookup command ({cli} lookup --help "
                      f"exits {done.returncode}: {(done.stderr or done.stdout).strip()[:120]})")
    return cli, done.stdout + done.stderr


def test_lookup_equals_the_cpp_clients_bytes(memory_server, client, tmp_path):
    cli, help_text = cli_lookup_help()
    if cli is None:
        pytest.skip(help_text)
    # The options the C++ client's topk command has, with --memory, --heads and --out.
    needed = ["--memory", "--k", "--heads", "--input", "--out"]
    missing = [option for option in needed if option not in help_text]
    if missing:
        pytest.skip(f"pkserve-cli lookup has no {', '.join(missing)} (its --help:"
                    f" {help_text.strip()[:200]})")
    scores = normal_scores(20, [64, 64], seed=12)
    np.save(tmp_path / "scores.npy", scores)
    subprocess.run([cli, "lookup", f"--target={memory_server.target}", "--memory=m32", "--k=16",
                    "--heads=2", f"--input={tmp_path / 'scores.npy'}",
                    f"--out={tmp_path / 'out.npy'}"], check=True, capture_output=True, timeout=60)
    cpp = np.load(tmp_path / "out.npy")
    ours = client.lookup("m32", scores, 16, 2)
    assert cpp.dtype == ours.dtype and cpp.shape == ours.shape
    assert cpp.tobytes() == ours.tobytes()
