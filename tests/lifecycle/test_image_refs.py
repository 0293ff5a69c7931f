"""The boundaries of the image reference grammar (blueprints/image_refs.py, distribution/reference's
rules): digest lengths by algorithm, the 255-character name, which part is the repository, and that a
parsed reference cannot be changed."""

from __future__ import annotations

import dataclasses

import pytest

from llmctl.blueprints.image_refs import NAME_MAX, parse_reference

HEX = "0123456789abcdef" * 8


@pytest.mark.parametrize(("algorithm", "length"), [("sha256", 64), ("sha384", 96), ("sha512", 128)])
def test_each_digest_algorithm_takes_exactly_its_length(algorithm: str, length: int) -> None:
    assert parse_reference(f"ray@{algorithm}:{HEX[:length]}").digest == f"{algorithm}:{HEX[:length]}"
    for wrong in (length - 1, length + 1):
        with pytest.raises(ValueError, match=f"digest '{algorithm}:"):
            parse_reference(f"ray@{algorithm}:{(HEX * 2)[:wrong]}")


def test_the_name_may_be_255_characters_and_no_more() -> None:
    prefix = "registry.example/"
    assert parse_reference(prefix + "a" * (NAME_MAX - len(prefix)) + ":1").tag == "1"
    with pytest.raises(ValueError, match="longer than 255 characters"):
        parse_reference(prefix + "a" * (NAME_MAX - len(prefix) + 1) + ":1")
    assert NAME_MAX == 255


def test_the_repository_is_the_name_before_the_tag_and_the_digest() -> None:
    with pytest.raises(ValueError, match=r"must be lower-case \('library/Ray'\)"):
        parse_reference(f"Ray@sha256:{HEX[:64]}")
    with pytest.raises(ValueError, match="digest 'SHA256:"):  # the digest is not part of the repository
        parse_reference(f"ray@SHA256:{HEX[:64]}")
    with pytest.raises(ValueError, match=r"must be lower-case \('library/Ray'\)"):
        parse_reference("Ray:1")


def test_a_parsed_reference_cannot_be_changed() -> None:
    ref = parse_reference("ray:1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ref.tag = "2"  # type: ignore[misc]
