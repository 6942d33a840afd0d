"""Inspecting checkpoints: timelines, what the model saw, tool pairs, diffs, fork trees."""
