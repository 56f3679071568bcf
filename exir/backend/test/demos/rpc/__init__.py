"""`ExecutorBackend`: delegates whose payload is a nested `.pte` the runtime itself runs."""
