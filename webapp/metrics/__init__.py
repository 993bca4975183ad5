"""/metrics/*: finding and expanding metric names."""
