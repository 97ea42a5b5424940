"""ValidatingAdmissionPolicy and MutatingAdmissionPolicy generated from the rules."""
