"""The one loop of check, fix and audit, and the report formats."""
