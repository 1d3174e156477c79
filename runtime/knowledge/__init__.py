"""Knowledge bases: documents indexed once, searched by meaning (``bases.py``)."""
