"""One module per placement rule, each offering filters (hard) and scorers (soft) to the pipeline (pure)."""
