"""`kerneltune bench ranker-attention`: standard shapes, baselines and targets."""
