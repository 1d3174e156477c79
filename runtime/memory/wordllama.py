"""The embedding model the ``wordllama`` package ships inside its wheel, loaded from
the package's own files: nothing is downloaded, ever.

``WordLlama.load()`` of wordllama 0.4.0.post1 looks for the tokenizer outside the
package and then downloads it from huggingface.co, so it is not used: the weights
(``weights/l2_supercat_256.safetensors``, 16 MB) and the tokenizer
(``tokenizers/l2_supercat_tokenizer_config.json``) are read here. The model is
static token embeddings (a 32,000 by 256 table distilled from Llama 2's), averaged
over a text's tokens: no torch, no GPU, about a millisecond per short text.
Imported only when memory search first needs it (``embedding.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.resources import files

import numpy as np
from safetensors import safe_open
from tokenizers import Tokenizer
from wordllama.inference import WordLlamaInference

NAME = "wordllama/l2_supercat_256"
"""Stored with each vector: vectors of another model are never compared with these."""


class WordLlamaModel:
    def __init__(self) -> None:
        package = files("wordllama")
        tokenizer = Tokenizer.from_file(
            str(package / "tokenizers" / "l2_supercat_tokenizer_config.json")
        )
        weights = str(package / "weights" / "l2_supercat_256.safetensors")
        with safe_open(weights, framework="np", device="cpu") as tensors:
            table = tensors.get_tensor("embedding.weight")
        self._model = WordLlamaInference(table, tokenizer)
        self.name = NAME

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        """Unit-length float32 vectors, little-endian bytes."""
        vectors = self._unit(list(texts))
        return [row.astype("<f4").tobytes() for row in vectors]

    def similarities(self, query: str, vectors: Sequence[bytes]) -> list[float]:
        """Cosine similarity of the query with each stored vector."""
        if not vectors:
            return []
        table = np.frombuffer(b"".join(vectors), dtype="<f4").reshape(len(vectors), -1)
        scores = table @ self._unit([query])[0]
        return [float(score) for score in scores]

    def _unit(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(self._model.embed(texts, norm=True), dtype=np.float32)
        return vectors.reshape(len(texts), -1)
