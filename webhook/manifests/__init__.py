"""Reading manifests as kubectl reads them: go-yaml v2, streams and documents, inputs."""
