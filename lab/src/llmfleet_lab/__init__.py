"""The lab: a throwaway podman cluster that emulates a small GPU fleet (placeholder)."""
