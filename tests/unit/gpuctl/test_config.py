"""Login contexts: a 0600 file; --context, then GPUCTL_CONTEXT, choose the context; GPUCTL_API_KEY wins."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from libs.gpuctl.client import ExitCode, GpuctlError
from libs.gpuctl.config import Config, Context, check_url, config_path, load, resolve, save

TWO = Config(
    contexts={
        "dev": Context(url="http://127.0.0.1", api_key="dev-key"),
        "prod": Context(url="https://gpu.example.com", base_port=9001, api_key="prod-key", tenant="acme"),
    },
    current="dev",
)


def test_the_file_lives_under_xdg_config_home_or_else_dot_config() -> None:
    assert config_path({"XDG_CONFIG_HOME": "/x"}) == Path("/x/gpuctl/config.yaml")
    assert config_path({}) == Path.home() / ".config" / "gpuctl" / "config.yaml"


def test_saved_contexts_read_back_and_only_the_owner_may_read_them(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "gpuctl" / "config.yaml"
    save(TWO, path)
    assert load(path) == TWO
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_saving_again_keeps_the_file_private_even_if_it_was_opened_up(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    save(TWO, path)
    path.chmod(0o644)
    save(TWO.without("prod"), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert set(load(path).contexts) == {"dev"}


def test_the_current_context_is_used_when_none_is_named() -> None:
    target = resolve(TWO, flag=None, environ={})
    assert (target.name, target.context.api_key, target.key_from_env) == ("dev", "dev-key", False)


def test_gpuctl_context_wins_over_the_current_one_and_the_flag_wins_over_both() -> None:
    assert resolve(TWO, flag=None, environ={"GPUCTL_CONTEXT": "prod"}).name == "prod"
    assert resolve(TWO, flag="dev", environ={"GPUCTL_CONTEXT": "prod"}).name == "dev"


def test_gpuctl_api_key_wins_over_the_stored_key() -> None:
    target = resolve(TWO, flag="prod", environ={"GPUCTL_API_KEY": "from-env"})
    assert (target.context.api_key, target.context.tenant, target.key_from_env) == ("from-env", "acme", True)


def test_without_a_file_the_key_from_the_environment_reaches_the_local_defaults() -> None:
    target = resolve(Config(), flag=None, environ={"GPUCTL_API_KEY": "k"})
    assert target.context.service_url("scheduler") == "http://127.0.0.1:8002"


def test_an_unknown_context_is_a_usage_error_listing_the_known_ones() -> None:
    with pytest.raises(GpuctlError) as raised:
        resolve(TWO, flag="staging", environ={})
    assert raised.value.exit_code is ExitCode.USAGE
    assert "known: dev, prod" in raised.value.message


def test_services_follow_the_base_port_unless_one_is_placed_elsewhere() -> None:
    context = Context(
        url="https://gpu.example.com", base_port=9001, services={"billing": "https://bills.example/"}
    )
    assert context.service_url("inventory") == "https://gpu.example.com:9001"
    assert context.service_url("recovery") == "https://gpu.example.com:9006"
    assert context.service_url("billing") == "https://bills.example"


@pytest.mark.parametrize("url", ["ftp://host", "http://host:8001", "http://host/api", "localhost"])
def test_a_context_url_is_a_scheme_and_host_only(url: str) -> None:
    with pytest.raises(GpuctlError) as raised:
        check_url(url)
    assert (raised.value.exit_code, raised.value.field) == (ExitCode.USAGE, "url")


def test_a_broken_file_is_named_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("contexts:\n  dev: [not, a, mapping]\n")
    with pytest.raises(GpuctlError) as raised:
        load(path)
    assert "context 'dev' is not a mapping" in raised.value.message
