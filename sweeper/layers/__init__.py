"""Building blocks the families' models share: per-model (packed) ops, initialisers and the
hand-written recurrences. Each works on K models at once, with a leading model dim K."""
