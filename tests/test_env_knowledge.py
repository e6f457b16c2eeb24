"""Environments own their knowledge: the interface, discovery by entry point, and a new environment
(``tests/keysdoors``) that trains with every method through the CLI."""

import json

from builtin_pins import PINS, fingerprints


def test_builtin_environments_produce_what_they_did_before_the_knowledge_moved():
    # Pinned before the move into the environments' folders (see builtin_pins.py): rollouts of a
    # scripted actor, the bank the template synthesizer writes from them, the oracle's advice, the
    # warm start's demonstrations and the tiny model's vocabulary, for household and shop.
    assert fingerprints() == json.loads(PINS.read_text())
