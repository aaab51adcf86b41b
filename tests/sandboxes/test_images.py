from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from sandboxes import SandboxError, cache, docker_images, images, layers, rootfs
from sandboxes.errors import SandboxDataError


def test_suite_comes_from_the_host_or_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AEM_DEBIAN_SUITE", raising=False)
    host = layers.debian_suite()
    assert host.isalpha() and host.islower()
    monkeypatch.setenv("AEM_DEBIAN_SUITE", "trixie")
    assert layers.debian_suite() == "trixie"


def test_base_tag_is_stable_and_follows_its_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    first = layers.base_tag()
    assert first == layers.base_tag()
    assert first.startswith("aem-sandbox/base:")
    monkeypatch.setenv("AEM_DEBIAN_SUITE", "some-other-release")
    assert layers.base_tag() != first


def test_base_packages_include_the_tools_the_tasks_need() -> None:
    packages = set(layers.base_packages())
    assert {"python3", "python3-venv", "python3-pip", "git", "patch", "python3-pytest"} <= packages


def test_recipes_use_only_legacy_builder_syntax() -> None:
    for name in ("Dockerfile.env", "Dockerfile.instance"):
        text = (layers.RECIPES / name).read_text()
        assert "<<" not in text and "--mount" not in text and "syntax=" not in text


def test_cache_dir_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AEM_SANDBOX_CACHE", str(tmp_path))
    assert cache.cache_dir() == tmp_path
    assert rootfs.base_rootfs_path().parent == tmp_path / "rootfs"


def test_cache_dir_follows_aems_cache_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """One ``$AEM_CACHE_DIR`` moves every aem cache, models and sandboxes alike."""
    from sandboxes.cache import aem_cache_root

    monkeypatch.delenv("AEM_SANDBOX_CACHE", raising=False)
    monkeypatch.setenv("AEM_CACHE_DIR", str(tmp_path))
    assert cache.cache_dir() == aem_cache_root() / "sandboxes" == tmp_path / "sandboxes"
    assert cache.aem_cache_root() == tmp_path


def test_cache_root_without_aems_variable_is_xdgs_or_the_home_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("AEM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.aem_cache_root() == tmp_path / "aem"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.aem_cache_root() == Path.home() / ".cache" / "aem"


def test_rootfs_for_a_directory_is_the_directory(tmp_path: Path) -> None:
    assert rootfs.rootfs_for_image(str(tmp_path)) == tmp_path


def test_unknown_image_without_engine_is_one_clear_error(no_engine: None) -> None:
    with pytest.raises(SandboxError, match="no root file system for image"):
        rootfs.rootfs_for_image("aem-sandbox/instance:0000000000000000")


def make_wheel(directory: Path) -> Path:
    """A minimal pure-Python wheel, written by hand (no network, no build backend)."""
    path = directory / "aemprobe-1.0-py3-none-any.whl"
    files = {
        "aemprobe/__init__.py": "ANSWER = 42\n",
        "aemprobe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: aemprobe\nVersion: 1.0\n",
        "aemprobe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "aemprobe-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr("aemprobe-1.0.dist-info/RECORD", record)
    return path


def test_env_layer_refuses_non_wheels(tmp_path: Path) -> None:
    (tmp_path / "x.tar.gz").write_text("")
    with pytest.raises(SandboxDataError, match="not a wheel file"):
        images.ensure_env_image([tmp_path / "x.tar.gz"], base_image="unused", client=object())


def test_instance_layer_refuses_a_missing_bundle(tmp_path: Path) -> None:
    with pytest.raises(SandboxDataError, match="does not exist"):
        images.ensure_instance_image(tmp_path / "none.bundle", "abc123", client=object())


@pytest.mark.docker
@pytest.mark.slow
def test_env_and_instance_layers_install_wheels_and_check_out_the_commit(
    base_image: str, repo_bundle: tuple[Path, str], tmp_path: Path
) -> None:
    from sandboxes import open_sandbox

    wheel = make_wheel(tmp_path)
    env = images.ensure_env_image([wheel], base_image=base_image, progress=None)
    assert env.startswith("aem-sandbox/env:")
    assert images.ensure_env_image([wheel], base_image=base_image, progress=None) == env
    bundle, commit = repo_bundle
    setup = ["python3 -c 'import aemprobe' && echo built > BUILD_MARK"]
    tag = images.ensure_instance_image(
        bundle, commit, env_image=env, setup_commands=setup, progress=None
    )
    other = images.ensure_instance_image(bundle, commit, env_image=env, progress=None)
    assert tag != other  # setup commands are part of the hash
    with open_sandbox(tag, backend="docker") as box:
        assert box.exec("git rev-parse HEAD").output.strip() == commit
        assert box.exec("cat BUILD_MARK").output == "built\n"
        assert box.exec("python3 -c 'import aemprobe; print(aemprobe.ANSWER)'").output == "42\n"


@pytest.mark.docker
def test_a_bad_setup_command_fails_the_build_with_its_output(
    base_image: str, repo_bundle: tuple[Path, str]
) -> None:
    bundle, commit = repo_bundle
    with pytest.raises(SandboxError, match="building aem-sandbox/instance"):
        images.ensure_instance_image(
            bundle, commit, env_image=base_image, setup_commands=["false"], progress=None
        )


def test_layers_build_without_docker_as_root_file_systems(
    bwrap_instance_image: str, base_rootfs: Path, tmp_path: Path, no_engine: None
) -> None:
    from sandboxes import open_sandbox

    root = rootfs.rootfs_for_image(bwrap_instance_image)
    assert (root / cache.LAYER_MARK).read_text().strip() == bwrap_instance_image
    assert (root / "testbed" / "calc.py").exists()
    assert (root / "usr" / "bin" / "python3").samefile(base_rootfs / "usr" / "bin" / "python3")
    env = images.ensure_env_image([make_wheel(tmp_path)], progress=None)
    assert env.startswith("aem-sandbox/env:")
    with open_sandbox(env, workdir="/testbed") as box:
        assert box.backend == "bwrap"
        assert box.exec("python3 -c 'import aemprobe; print(aemprobe.ANSWER)'").output == "42\n"


def test_bwrap_backend_builds_root_file_systems_even_where_an_engine_answers(
    bwrap_instance_image: str, repo_bundle: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``backend="bwrap"`` never builds a Docker image only to export it again."""

    def refuse(*_args: object, **_options: object) -> None:
        raise AssertionError("a Docker build was started for the bubblewrap backend")

    monkeypatch.setattr(docker_images, "build_layer", refuse)
    bundle, commit = repo_bundle
    tag = images.ensure_instance_image(bundle, commit, backend="bwrap", progress=None)
    assert tag == bwrap_instance_image  # same inputs, same tag, whichever backend built it
    assert (rootfs.rootfs_path(tag) / cache.LAYER_MARK).exists()


def test_image_available_for_bwrap_looks_at_root_file_systems(
    bwrap_instance_image: str, tmp_path: Path, no_engine: None
) -> None:
    assert images.image_available(bwrap_instance_image, backend="bwrap")
    assert images.image_available(str(tmp_path), backend="bwrap")
    assert not images.image_available("aem-sandbox/instance:0000000000000000", backend="bwrap")


@pytest.mark.docker
def test_image_available_for_docker_asks_the_engine(instance_image: str) -> None:
    assert images.image_available(instance_image, backend="docker")
    assert not images.image_available("aem-sandbox/instance:0000000000000000", backend="docker")
