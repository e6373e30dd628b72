"""Work over the whole store rather than one run: retention (deleting, pruning, vacuuming) and resealing
(rekeying and encrypting in place). Built on `_db` only."""
