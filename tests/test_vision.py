"""Vision models: a generated projector loads and encodes with real llama.cpp (mtmd), the
plan's projector bytes match what mtmd reports, chat with images end to end, hostile images."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rooflight.errors import BadInputError
from rooflight.estimate import Wishes, plan
from rooflight.estimate.vision import compute_buffer_bytes
from rooflight.gguf import load_model_spec
from rooflight.gguf.projector import (
    is_projector_name,
    load_projector_spec,
    pair_local,
    with_projector,
)
from rooflight.hardware.profile import CPUInfo, GPUInfo, HardwareProfile
from rooflight.runtime.chat import ChatSession
from rooflight.runtime.engine import load_engine
from rooflight.runtime.images import check_image, read_image
from rooflight.runtime.loader import plan_load
from rooflight.runtime.sampling import Sampling
from rooflight.store.chats import ChatStore
from vision_files import png_bytes, png_header_only, vision_model

pytest.importorskip("llama_cpp")

GiB = 2**30
MIB = 2**20
HOST = HardwareProfile(
    cpu=CPUInfo("test host", 2, 2, ("avx2",), 16 * GiB, 16 * GiB, 20.0, "profile", 3000.0), backend="cpu")
GREEDY = Sampling(temperature=0.0, max_tokens=6, seed=1)


@pytest.fixture(scope="module")
def vis(tmp_path_factory):
    lm, proj = vision_model(tmp_path_factory.mktemp("vis"))
    lp = plan_load(lm, Wishes(n_ctx=512), hardware=HOST, spec=pair_local(load_model_spec(lm), lm))
    with load_engine(lp) as eng:
        yield eng


def test_projector_names():
    assert is_projector_name("mmproj-gemma-3-12b-it-f16.gguf")
    assert is_projector_name("gemma-3-4b-it-mmproj-Q8_0.gguf")
    assert is_projector_name("sub/mmproj-F16.gguf")
    assert not is_projector_name("gemma-3-4b-it-Q4_K_M.gguf")
    assert not is_projector_name("mmprojector-notes.txt")


def test_generated_projector_loads_and_encodes_an_image(vis):
    """The projector is paired from the model's folder, mtmd loads it with the model, and a
    40x30 image becomes (128 / 8 / 4)^2 = 16 tokens that reach the model."""
    assert vis.vision is not None
    assert vis.plan.spec.projector.image_tokens == 16
    session = ChatSession(vis, sampling=GREEDY)
    reply = session.send("what is this?", images=[check_image(png_bytes(40, 30), "a.png")])
    assert reply.stats.image_tokens == 16
    assert reply.stats.image_s > 0
    text_only = ChatSession(vis, sampling=GREEDY).send("what is this?")
    # the image's 16 tokens plus the <start_of_image>/<end_of_image> text mtmd wraps them in
    assert reply.stats.prompt_tokens >= text_only.stats.prompt_tokens + 16
    # a later turn still shows the model the image (evaluated again, never matched as text)
    later = session.send("and now?")
    assert later.stats.image_tokens == 16 and later.stats.cached_tokens == 0


def test_image_tokens_follow_the_projector(tmp_path):
    """The same image through a projector that merges 2x2 instead of 4x4 patches: 64 tokens
    instead of 16, and the prompt the model saw is exactly 48 tokens longer."""
    counts = {}
    for merge in (4, 2):
        lm, proj = vision_model(tmp_path / f"m{merge}", n_merge=merge)
        spec = with_projector(load_model_spec(lm), proj)
        with load_engine(plan_load(lm, Wishes(n_ctx=512), hardware=HOST, spec=spec)) as eng:
            r = ChatSession(eng, sampling=GREEDY).send("hi", images=[check_image(png_bytes(20, 20))])
            counts[merge] = (r.stats.image_tokens, r.stats.prompt_tokens)
    assert counts[4][0] == 16 and counts[2][0] == 64
    assert counts[2][1] - counts[4][1] == 48


@pytest.mark.parametrize("flash", [False, True])
def test_plan_projector_bytes_match_what_mtmd_reports(tmp_path, flash):
    """Weights and compute buffer of a 1024-patch projector as mtmd logs them (0.01 MiB
    resolution), against the plan; the plan's CPU total grows by exactly those bytes."""
    lm, proj = vision_model(tmp_path, n_embd=128, **{"n_ff": 512, "n_head": 4, "image_size": 256,
                                                     "patch_size": 8})
    base = load_model_spec(lm)
    spec = with_projector(base, proj)
    wishes = Wishes(n_ctx=512, flash_attn="on" if flash else "off")
    with load_engine(plan_load(lm, wishes, hardware=HOST, spec=spec)) as eng:
        reported = eng.vision.buffers
    p = spec.projector
    assert abs(p.weights_bytes - reported.weights_bytes) <= 0.006 * MIB
    assert abs(compute_buffer_bytes(p, flash) - reported.compute_bytes) <= 0.006 * MIB
    with_p = plan(spec, HOST, wishes).memory.device("cpu")
    without = plan(base, HOST, wishes).memory.device("cpu")
    assert with_p.weights_bytes - without.weights_bytes == p.weights_bytes
    assert with_p.compute_bytes - without.compute_bytes == compute_buffer_bytes(p, flash)


def test_projector_goes_with_the_model_to_the_gpu_and_counts_in_the_fit(tmp_path):
    lm, proj = vision_model(tmp_path)
    spec = with_projector(load_model_spec(lm), proj)
    gpu = HardwareProfile(cpu=HOST.cpu, gpus=(GPUInfo(index=0, name="RTX 3060", vendor="nvidia",
                                                      vram_total_bytes=12 * GiB, vram_free_bytes=12 * GiB,
                                                      bandwidth_gbs=360.0, fp16_tflops=25.0),),
                          backend="cuda")
    est = plan(spec, gpu, Wishes(n_ctx=512))
    assert est.fit == "full_gpu" and est.vision.device == "gpu0"
    no_proj = plan(load_model_spec(lm), gpu, Wishes(n_ctx=512))
    assert (est.memory.device("gpu0").total_bytes - no_proj.memory.device("gpu0").total_bytes
            == spec.projector.weights_bytes + est.vision.compute_bytes)
    # time to first token includes encoding one image and prefilling its tokens
    assert est.performance.time_to_first_token_s > no_proj.performance.time_to_first_token_s
    cpu_only = plan(spec, gpu, Wishes(n_ctx=512, n_gpu_layers=0))
    assert cpu_only.vision.device == "cpu"
    assert est.to_dict()["vision"]["image_tokens"] == 16


def test_a_projector_of_another_model_is_refused(tmp_path):
    lm, _ = vision_model(tmp_path / "a")
    _, other = vision_model(tmp_path / "b", n_embd=128)
    with pytest.raises(BadInputError, match="belongs to another model"):
        with_projector(load_model_spec(lm), other)
    assert load_projector_spec(other).projection_dim == 128


def test_model_without_projector_says_so(tmp_path):
    from rooflight.gguf.synthetic import write_model

    lm = write_model(tmp_path / "plain.gguf", n_layer=1, n_embd=64, n_vocab=400)
    with load_engine(plan_load(lm, Wishes(n_ctx=256), hardware=HOST)) as eng:
        session = ChatSession(eng, sampling=GREEDY)
        with pytest.raises(BadInputError, match="has no vision projector"):
            session.send("look", images=[check_image(png_bytes(8, 8))])
        assert session.messages == []  # nothing half-sent


@pytest.mark.parametrize("data,match", [
    (png_bytes(32, 32)[:-20], "cut short"),
    (b"hello, I am text", "not a PNG, JPEG, GIF or BMP"),
    (png_header_only(40000, 40000), "megapixels"),
    (b"\x89PNG\r\n\x1a\n\0\0", "damaged PNG"),
    (b"\xff\xd8\xff\xe0\0\x10JFIF\0" + b"\0" * 40, "damaged JPEG|cut short"),
])
def test_hostile_images_get_one_sentence(data, match):
    with pytest.raises(BadInputError, match=match) as info:
        check_image(data, "x.png")
    assert "\n" not in str(info.value)


def test_image_files_missing_huge_or_folders(tmp_path):
    with pytest.raises(BadInputError, match="does not exist"):
        read_image(tmp_path / "nope.png")
    with pytest.raises(BadInputError, match="is a folder"):
        read_image(tmp_path)
    big = tmp_path / "big.png"
    with open(big, "wb") as f:
        f.truncate(60 * 1024 * 1024)  # sparse: not read at all
    with pytest.raises(BadInputError, match="MB"):
        read_image(big)


def test_a_bad_image_loses_nothing(vis, tmp_path):
    store = ChatStore(tmp_path / "chats.sqlite3")
    session = ChatSession(vis, sampling=GREEDY, store=store)
    session.send("first")
    with pytest.raises(BadInputError):
        session.send("look", images=[check_image(b"not an image")])
    assert [m.role for m in session.messages] == ["user", "assistant"]
    assert session.send("still here").text is not None
    store.close()


def test_images_are_stored_once_by_hash_and_exported(vis, tmp_path):
    store = ChatStore(tmp_path / "chats.sqlite3")
    img = check_image(png_bytes(24, 24, seed=3), "cat.png")
    a = ChatSession(vis, sampling=GREEDY, store=store)
    a.send("one", images=[img])
    b = ChatSession(vis, sampling=GREEDY, store=store)
    b.send("two", images=[img])
    files = list(store.images_dir.iterdir())
    assert [f.name for f in files] == [f"{img.sha256}.png"]  # two chats, one file
    # a stored chat continues with its image in view
    again = ChatSession(vis, sampling=GREEDY, store=store, chat_id=a.chat_id)
    assert again.messages[0].images[0].sha256 == img.sha256
    assert again.send("more").stats.image_tokens == 16
    doc = store.export_json(a.chat_id)
    assert doc["messages"][0]["images"][0]["sha256"] == img.sha256
    assert img.sha256 in store.export_markdown(a.chat_id)
    # deleting one chat keeps the file the other still uses; deleting both removes it
    store.delete_chat(a.chat_id)
    assert files[0].exists()
    store.delete_chat(b.chat_id)
    assert not files[0].exists()
    # the export brings it back
    new_id = store.import_json(doc)
    assert store.messages(new_id)[0].images[0].path.read_bytes() == img.data
    bad = replace_image_data(doc, "bm90IGFuIGltYWdl")  # base64 of "not an image"
    with pytest.raises(BadInputError, match="not a PNG"):
        store.import_json(bad)
    store.close()


def replace_image_data(doc: dict, b64: str) -> dict:
    msgs = [dict(m) for m in doc["messages"]]
    msgs[0] = {**msgs[0], "images": [{**msgs[0]["images"][0], "data_base64": b64}]}
    return {**doc, "messages": msgs}


def test_prompt_with_images_longer_than_the_context_is_one_sentence(tmp_path):
    lm, proj = vision_model(tmp_path, n_merge=1, image_size=128, patch_size=8)  # 256 tokens per image
    spec = with_projector(load_model_spec(lm), proj)
    with load_engine(plan_load(lm, Wishes(n_ctx=256), hardware=HOST, spec=spec)) as eng:
        session = ChatSession(eng, sampling=replace(GREEDY, max_tokens=16))
        with pytest.raises(BadInputError, match="longer context"):
            session.send("hi", images=[check_image(png_bytes(8, 8))])


def test_trailing_bytes_after_the_end_marker_are_fine():
    img = check_image(png_bytes(8, 8) + b"\0\0trailing", "padded.png")
    assert (img.width, img.height, img.format) == (8, 8, "png")


def test_reply_prediction_counts_the_images_of_the_turn(vis):
    session = ChatSession(vis, sampling=GREEDY)
    text = session.send("plain words")
    with_image = session.send("look", images=[check_image(png_bytes(10, 10))])
    from rooflight.estimate.perf import image_first_token_s

    lp = vis.plan
    enc = lp.estimate.vision.encode_s

    def plan_ttft(n_prefill: int) -> tuple[float, float]:  # with one image, and that image's share
        est = vis.predict(n_prefill, 1)[0]
        return est.time_to_first_token_s, image_first_token_s(lp.spec, lp.hardware, lp.config,
                                                              est.prefill_tok_s)

    # a text-only turn predicts no image; an image turn its one encode (its tokens are prefill)
    full, image = plan_ttft(text.stats.prefill_tokens)
    assert text.stats.predicted["time_to_first_token_s"] == pytest.approx(full - image, abs=1e-4)
    full, image = plan_ttft(with_image.stats.prefill_tokens)
    assert with_image.stats.predicted["time_to_first_token_s"] == pytest.approx(full - image + enc, abs=1e-4)


def test_a_projector_llama_cpp_refuses_leaves_text_chat_working(tmp_path):
    lm, proj = vision_model(tmp_path)
    data = proj.read_bytes()
    proj.write_bytes(data.replace(b"gemma3", b"gemmaX"))  # a projector type mtmd does not know
    spec = with_projector(load_model_spec(lm), proj)
    with load_engine(plan_load(lm, Wishes(n_ctx=256), hardware=HOST, spec=spec)) as eng:
        assert eng.vision is None
        assert any("could not load the vision projector" in n and "Text chat works" in n for n in eng.notices)
        session = ChatSession(eng, sampling=GREEDY)
        assert session.send("hello").stats.generated_tokens > 0
        with pytest.raises(BadInputError, match="has no vision projector"):
            session.send("look", images=[check_image(png_bytes(8, 8))])


def test_with_only_rpc_servers_to_offload_to_the_projector_stays_on_this_cpu(tmp_path):
    """clip.cpp takes the first GPU-type device when told to use a GPU; on a machine whose only
    such devices are RPC servers, the chat loads the projector on the CPU (use_gpu comes from
    projector_device) and the plan counts it there."""
    from rooflight.hardware import profile_from_dict

    lm, proj = vision_model(tmp_path)
    spec = with_projector(load_model_spec(lm), proj)
    hw = profile_from_dict({"cpu": {"cores": 8, "threads": 16, "ram_total_bytes": 32 * GiB,
                                    "ram_bandwidth_gbs": 50.0, "isa": ["avx2"]},
                            "remotes": [{"endpoint": "192.168.1.20:50052", "gpus": [{"name": "RTX 3090"}]}]},
                           measure_bandwidth=False)
    est = plan(spec, hw, Wishes(n_ctx=512))
    assert est.config.n_gpu_layers > 0 and "rpc0" in est.memory.layer_devices
    assert est.vision.device == "cpu"
    assert est.memory.device("cpu").weights_bytes >= spec.projector.weights_bytes
