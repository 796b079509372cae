import json

import pytest

from toolcall_repro.configarg import load_config_arg


def test_json_file_keeps_small_floats_numbers(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"lr": 1e-05, "n": 8}))  # json writes 1e-05, which YAML 1.1 reads as a string
    assert load_config_arg(str(path)) == {"lr": 1e-05, "n": 8}


def test_inline_json_and_yaml_file(tmp_path):
    assert load_config_arg('{"lr": 3e-05}') == {"lr": 3e-05}
    path = tmp_path / "c.yaml"
    path.write_text("lr: 0.00003\nepochs: 5\n")
    assert load_config_arg(str(path)) == {"lr": 3e-05, "epochs": 5}


def test_missing_file_and_non_mapping(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither inline JSON nor an existing file"):
        load_config_arg(str(tmp_path / "absent.json"))
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="does not hold a mapping"):
        load_config_arg(str(path))
