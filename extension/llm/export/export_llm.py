"""`python -m executorch.extension.llm.export.export_llm`: export a Llama-family model from an LlmConfig.

    python -m executorch.extension.llm.export.export_llm base.model_class=llama3 base.params=params.json \\
        model.use_kv_cache=True model.use_sdpa_with_kv_cache=True quantization.qmode=8da4w \\
        backend.xnnpack.enabled=True
    python -m executorch.extension.llm.export.export_llm --config my_config.yaml export.output_name=out.pte

Overrides are `section.field=value` with LlmConfig's names; `--config FILE.yaml` is read first (nested sections,
as ExecuTorch's example configs are written) and the overrides apply on top. Values are typed by the field they
set: True/False, integers, null, enum names, strings (one pair of surrounding quotes is dropped). This small
parser stands in for Hydra, whose override grammar beyond `key=value` (sweeps, `+key`, `~key`, config groups)
export_llm's own configs do not use.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import typing
from typing import Any, Optional, Sequence

from executorch.extension.llm.export.config.llm_config import UNSUPPORTED, LlmConfig

_USAGE = ("usage: python -m executorch.extension.llm.export.export_llm [--config FILE.yaml] "
          "[section.field=value ...]")


class ConfigError(ValueError):
    """A command-line or YAML setting that names no option, an unsupported one, or a value of the wrong type."""


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@dataclasses.dataclass(frozen=True)
class _Text:
    """A command-line value, typed only once the field it sets is known."""

    text: str

    def unquoted(self) -> str:
        text = self.text
        return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def _scalar(text: str) -> Any:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "none", "~"):
        return None
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    return text


def _coerce(key: str, kind: Any, value: Any) -> Any:
    """`value` (from YAML or the command line) as the type of field `key`."""
    if isinstance(value, _Text):
        value = None if value.text.lower() == "null" else value.unquoted() if _is_text(kind) else _scalar(value.text)
    if typing.get_origin(kind) is typing.Union:
        if value is None:
            return None
        kind = next(arg for arg in typing.get_args(kind) if arg is not type(None))
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        choices = [member.value for member in kind]
        if str(value) not in choices:
            raise ConfigError(f"{key}={value!r} is not supported here (supported: {', '.join(choices)})")
        return kind(str(value))
    if kind is bool:
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise ConfigError(f"{key} takes True or False, not {value!r}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} takes an integer, not {value!r}")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key} takes a number, not {value!r}")
        return float(value)
    if kind is str:
        return value if isinstance(value, str) else str(value)
    raise ConfigError(f"{key}: values of type {kind} cannot be set here")


def _is_text(kind: Any) -> bool:
    return kind is str or (typing.get_origin(kind) is typing.Union and str in typing.get_args(kind))


def _resolve(key: str) -> tuple[list[str], type, str]:
    """The section path, the dataclass holding the field, and the field name of dotted `key`."""
    parts = key.split(".")
    cls: type = LlmConfig
    for depth, part in enumerate(parts):
        section = ".".join(parts[:depth])
        if part in UNSUPPORTED.get(section, ()):
            raise ConfigError(f"{key}: ExecuTorch's option {'.'.join(parts[:depth + 1])} is not supported here")
        types = _field_types(cls)
        if part not in types:
            raise ConfigError(f"{key}: no such option (options of {section or 'the config'}: "
                              f"{', '.join(types)})")
        kind = types[part]
        if depth == len(parts) - 1:
            if dataclasses.is_dataclass(kind):
                raise ConfigError(f"{key} is a section; set its fields ({', '.join(_field_types(kind))})")
            return parts[:-1], cls, part
        if not dataclasses.is_dataclass(kind):
            raise ConfigError(f"{key}: {'.'.join(parts[:depth + 1])} is an option, not a section")
        cls = kind
    raise ConfigError(f"{key}: empty option name")


def _flatten(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if not isinstance(tree, dict):
        raise ConfigError(f"{prefix or 'the config file'}: expected a mapping of options, got {tree!r}")
    items = []
    for name, value in tree.items():
        key = f"{prefix}.{name}" if prefix else str(name)
        items.extend(_flatten(value, key) if isinstance(value, dict) else [(key, value)])
    return items


def _read_yaml(path: str) -> list[tuple[str, Any]]:
    try:
        import yaml
    except ImportError:
        raise ConfigError("--config needs PyYAML: pip install pyyaml") from None
    with open(path, encoding="utf-8") as f:
        tree = yaml.safe_load(f)
    return _flatten(tree or {})


def _build(settings: list[tuple[str, Any]]) -> LlmConfig:
    """The LlmConfig with `settings` applied in order, its sections' checks run on the result."""
    values: dict[str, Any] = {}
    for key, value in settings:
        sections, cls, name = _resolve(key)
        values[key] = _coerce(key, _field_types(cls)[name], value)

    def make(cls: type, prefix: str) -> Any:
        kwargs = {}
        for name, kind in _field_types(cls).items():
            key = f"{prefix}{name}"
            if dataclasses.is_dataclass(kind):
                kwargs[name] = make(kind, f"{key}.")
            elif key in values:
                kwargs[name] = values[key]
        return cls(**kwargs)

    return make(LlmConfig, "")


def parse_args(argv: Sequence[str]) -> LlmConfig:
    """The LlmConfig of a command line: `--config FILE.yaml` first, then `key=value` overrides in order."""
    argv = list(argv)
    settings: list[tuple[str, Any]] = []
    config_path: Optional[str] = None
    overrides = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--config":
            if i + 1 >= len(argv):
                raise ConfigError("--config needs a file name")
            config_path, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--config="):
            config_path = arg.split("=", 1)[1]
        elif "=" in arg and not arg.startswith("-"):
            key, text = arg.split("=", 1)
            if key.startswith(("+", "~")):
                raise ConfigError(f"{arg}: Hydra's +/~ override forms are not supported; write key=value")
            overrides.append((key.strip(), _Text(text)))
        else:
            raise ConfigError(f"unexpected argument {arg!r}; {_USAGE}")
        i += 1
    if config_path:
        settings.extend(_read_yaml(config_path))
    settings.extend(overrides)
    return _build(settings)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(arg in ("-h", "--help") for arg in argv):
        print(_USAGE)
        print(__doc__)
        return 0
    try:
        config = parse_args(argv)
    except (ConfigError, ValueError) as e:
        print(f"export_llm: {e}", file=sys.stderr)
        return 2
    from executorch.examples.models.llama.export_llama_lib import export_llama

    try:
        path = export_llama(config)
    except ValueError as e:
        print(f"export_llm: {e}", file=sys.stderr)
        return 1
    print(f"export_llm: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
