"""Pure folds over records: transcript, surfaces, resume to provider formats, retention."""
