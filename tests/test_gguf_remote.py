"""Remote header reads (hf: URIs) through huggingface_hub against the local Hub stand-in,
and the stand-in itself, exercised with huggingface_hub's own client calls."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx2
import pytest
from gguf import GGMLQuantizationType as Q
from huggingface_hub import HfApi, constants, hf_hub_download
from huggingface_hub.errors import GatedRepoError, RemoteEntryNotFoundError, RepositoryNotFoundError

from rooflight.errors import BadInputError, OperationFailedError
from rooflight.gguf import load_model_spec, parse_hf_uri
from rooflight.gguf.remote import HubFile
from test_gguf_factory import llama_tensors, write_gguf

REPO = "tester/tiny-GGUF"
BIG = 20 * 1024 * 1024


@pytest.fixture(scope="module")
def big_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model header followed by 20 MB of tensor data (zeros)."""
    tensors = llama_tensors() + [("blk.1.ffn_big.weight", (2560, 2048), Q.F32)]
    (path,) = write_gguf(tmp_path_factory.mktemp("big") / "tiny-Q4_K_M.gguf", tensors=tensors)
    assert path.stat().st_size > BIG
    return path


# ---- the Hub stand-in speaks huggingface_hub's protocol -------------------------------------


def test_hf_hub_download_model_info_and_tree(hub_server) -> None:
    hub_server.add_file(REPO, "model.gguf", b"G" * 5000)
    hub_server.add_file(REPO, "README.md", b"# tiny\n")
    hub_server.add_file(REPO, "sub/notes.txt", b"hello")
    path = hf_hub_download(REPO, "model.gguf")
    assert Path(path).read_bytes() == b"G" * 5000
    assert Path(path).is_relative_to(constants.HF_HUB_CACHE)
    assert Path(hf_hub_download(REPO, "sub/notes.txt")).read_bytes() == b"hello"

    info = HfApi().model_info(REPO, files_metadata=True)
    assert info.id == REPO and len(info.sha) == 40
    sib = {s.rfilename: s for s in info.siblings}
    assert set(sib) == {"model.gguf", "README.md", "sub/notes.txt"}
    assert sib["model.gguf"].size == 5000
    assert sib["model.gguf"].lfs.sha256 == hashlib.sha256(b"G" * 5000).hexdigest()
    assert sib["README.md"].lfs is None

    top = {e.path: e for e in HfApi().list_repo_tree(REPO)}
    assert set(top) == {"model.gguf", "README.md", "sub"}
    assert top["model.gguf"].lfs.size == 5000
    deep = {e.path for e in HfApi().list_repo_tree(REPO, recursive=True)}
    assert "sub/notes.txt" in deep
    # model_info at the commit works too
    assert HfApi().model_info(REPO, revision=info.sha).sha == info.sha
    assert hub_server.served(f"{REPO}/model.gguf") == 5000


def test_resolve_headers_and_ranges(hub_server) -> None:
    data = bytes(range(256)) * 40
    hub_server.add_file(REPO, "m.gguf", data)
    url = f"{hub_server.url}/{REPO}/resolve/main/m.gguf"
    with httpx2.Client() as c:
        head = c.head(url)
        assert head.status_code == 200
        assert head.headers["X-Linked-Etag"] == f'"{hashlib.sha256(data).hexdigest()}"'
        assert head.headers["X-Linked-Size"] == str(len(data))
        assert head.headers["Accept-Ranges"] == "bytes"
        assert len(head.headers["X-Repo-Commit"]) == 40
        r = c.get(url, headers={"Range": "bytes=10-19"})
        assert r.status_code == 206 and r.content == data[10:20]
        assert r.headers["Content-Range"] == f"bytes 10-19/{len(data)}"
        assert c.get(url, headers={"Range": "bytes=-5"}).content == data[-5:]
        r = c.get(url, headers={"Range": f"bytes={len(data)}-"})
        assert r.status_code == 416 and r.headers["Content-Range"] == f"bytes */{len(data)}"
        assert c.get(f"{hub_server.url}/{REPO}/resolve/main/none.gguf").status_code == 404


def test_hub_errors_through_huggingface_hub(hub_server) -> None:
    hub_server.add_file(REPO, "a.gguf", b"x" * 10)
    hub_server.add_file("tester/gated", "a.gguf", b"y" * 10)
    hub_server.require_token("tester/gated")
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(REPO, "missing.gguf")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("tester/nothing", "a.gguf")
    with pytest.raises(GatedRepoError):
        hf_hub_download("tester/gated", "a.gguf")
    assert HfApi().model_info("tester/gated").gated == "auto"  # info stays public
    assert Path(hf_hub_download("tester/gated", "a.gguf", token="hf_x")).read_bytes() == b"y" * 10


def test_drop_after_and_counters(hub_server) -> None:
    hub_server.add_file(REPO, "m.bin", b"z" * 100_000)
    hub_server.drop_after(f"{REPO}/m.bin", 1000)
    url = f"{hub_server.url}/{REPO}/resolve/main/m.bin"
    with httpx2.Client() as c:
        with pytest.raises(httpx2.RemoteProtocolError):
            c.get(url)
        assert c.get(url).content == b"z" * 100_000  # only once
    assert hub_server.served(f"{REPO}/m.bin") == 101_000
    gets = [r for r in hub_server.requests if r.path.endswith("m.bin")]
    assert [r.body_bytes for r in gets] == [1000, 100_000]


# ---- hf: URIs -------------------------------------------------------------------------------


def test_parse_hf_uri() -> None:
    assert parse_hf_uri("hf:a/b/c.gguf") == HubFile("a/b", "c.gguf", None)
    assert parse_hf_uri("hf:a/b-GGUF/Q4/c-00001-of-00002.gguf@v1.0") == HubFile(
        "a/b-GGUF", "Q4/c-00001-of-00002.gguf", "v1.0"
    )
    assert parse_hf_uri("hf://a/b/c.gguf").uri == "hf:a/b/c.gguf"
    for bad in ("hf:a/c.gguf", "hf:a/b/", "hf:a/b/c.gguf@", "hf:/b/c.gguf"):
        with pytest.raises(BadInputError, match="hf:OWNER/REPO/FILE.gguf"):
            parse_hf_uri(bad)


def test_remote_spec_equals_local_with_few_bytes(hub_server, big_gguf: Path) -> None:
    hub_server.add_file(REPO, big_gguf.name, big_gguf)
    local = load_model_spec(big_gguf)
    remote = load_model_spec(f"hf:{REPO}/{big_gguf.name}")
    assert remote == local
    assert remote.metadata == local.metadata
    served = hub_server.served(f"{REPO}/{big_gguf.name}")
    assert 0 < served <= 1024 * 1024 < big_gguf.stat().st_size // 20
    assert all(r.range is not None for r in hub_server.requests if r.method == "GET")


def test_remote_through_cdn_redirect(hub_server, big_gguf: Path) -> None:
    hub_server.redirect_lfs = True
    hub_server.add_file(REPO, big_gguf.name, big_gguf)
    spec = load_model_spec(f"hf:{REPO}/{big_gguf.name}", max_header_bytes=1 << 20)
    assert spec.n_layer == 2
    assert any(r.path.startswith("/_cdn/") for r in hub_server.requests)


def test_remote_revision(hub_server, big_gguf: Path) -> None:
    hub_server.add_file(REPO, big_gguf.name, big_gguf)
    sha = HfApi().model_info(REPO).sha
    assert load_model_spec(f"hf:{REPO}/{big_gguf.name}@{sha}").n_layer == 2
    with pytest.raises(BadInputError, match="revision nope does not exist"):
        load_model_spec(f"hf:{REPO}/{big_gguf.name}@nope")


def test_remote_not_found(hub_server) -> None:
    hub_server.add_file(REPO, "README.md", b"x")
    with pytest.raises(
        BadInputError, match=r"file missing.gguf does not exist in tester/tiny-GGUF"
    ):
        load_model_spec(f"hf:{REPO}/missing.gguf")
    with pytest.raises(BadInputError, match="repository tester/none does not exist"):
        load_model_spec("hf:tester/none/m.gguf")


def test_remote_gated_needs_token(hub_server, big_gguf: Path, monkeypatch) -> None:
    hub_server.add_file("tester/gated", "m.gguf", big_gguf)
    hub_server.require_token("tester/gated", "hf_secret")
    with pytest.raises(OperationFailedError) as e:
        load_model_spec("hf:tester/gated/m.gguf")
    msg = str(e.value)
    assert "gated or private" in msg and "HF_TOKEN" in msg and "licence" in msg
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    assert load_model_spec("hf:tester/gated/m.gguf").n_layer == 2


def test_remote_private_without_token(hub_server) -> None:
    hub_server.add_file("tester/private", "m.gguf", b"GGUF")
    hub_server.require_token("tester/private", private=True)
    with pytest.raises(BadInputError, match="does not exist on the Hub, or it is private"):
        load_model_spec("hf:tester/private/m.gguf")


def test_remote_header_cap(hub_server, big_gguf: Path) -> None:
    hub_server.add_file(REPO, big_gguf.name, big_gguf)
    with pytest.raises(BadInputError, match="header larger than"):
        load_model_spec(f"hf:{REPO}/{big_gguf.name}", max_header_bytes=2048)
    assert hub_server.served(f"{REPO}/{big_gguf.name}") <= 2048


def test_remote_not_gguf(hub_server) -> None:
    hub_server.add_file(REPO, "fake.gguf", b"<html>nope</html>")
    hub_server.add_file(REPO, "empty.gguf", b"")
    with pytest.raises(BadInputError, match="not a GGUF file"):
        load_model_spec(f"hf:{REPO}/fake.gguf")
    with pytest.raises(BadInputError, match="not a GGUF file"):
        load_model_spec(f"hf:{REPO}/empty.gguf")


def test_remote_split(hub_server, tmp_path: Path) -> None:
    parts = write_gguf(tmp_path / "tiny.gguf", split_max_tensors=7)
    for p in parts:
        hub_server.add_file(REPO, f"Q4/{p.name}", p)
    spec = load_model_spec(f"hf:{REPO}/Q4/{parts[0].name}")
    assert spec == load_model_spec(parts[0])
    assert spec.split_count == 3
    (hub_server.root / REPO / "Q4" / parts[2].name).unlink()
    with pytest.raises(BadInputError, match="tiny-00003-of-00003.gguf is missing"):
        load_model_spec(f"hf:{REPO}/Q4/{parts[0].name}")


def test_remote_connection_refused(hub_server, monkeypatch) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setattr(
        constants, "HUGGINGFACE_CO_URL_TEMPLATE", dead + "/{repo_id}/resolve/{revision}/{filename}"
    )
    with pytest.raises(OperationFailedError, match="Cannot reach http://127.0.0.1"):
        load_model_spec("hf:a/b/c.gguf")


def test_remote_offline(hub_server, monkeypatch) -> None:
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(OperationFailedError, match="offline"):
        load_model_spec("hf:a/b/c.gguf")


def test_remote_timeout(hub_server, monkeypatch) -> None:
    import socket

    from rooflight.gguf.splits import read_remote_headers

    with socket.socket() as s:  # accepts connections (backlog) but never answers
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        silent = f"http://127.0.0.1:{s.getsockname()[1]}"
        monkeypatch.setattr(
            constants,
            "HUGGINGFACE_CO_URL_TEMPLATE",
            silent + "/{repo_id}/resolve/{revision}/{filename}",
        )
        with pytest.raises(OperationFailedError, match="timed out after 0.3 s"):
            read_remote_headers(parse_hf_uri("hf:a/b/c.gguf"), timeout=0.3)
