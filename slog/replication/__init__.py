"""Replica state, leader/follower data paths and the controller."""
