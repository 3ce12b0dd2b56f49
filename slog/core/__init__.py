"""Storage and shared primitives. Nothing in here touches the network."""
