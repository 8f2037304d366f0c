"""Drop-in integrations of hanpu into other frameworks (transformers)."""
