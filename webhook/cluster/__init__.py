"""The Kubernetes API: listing, caBundle patching, and what the cluster says about its nodes."""
