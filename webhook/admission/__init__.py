"""The AdmissionReview protocol: the one place that knows it."""
