"""``python -m transformer_ref.data download|verify multi30k``: see
:func:`transformer_ref.data.datasets.main`."""

import sys

from transformer_ref.data.datasets import main

sys.exit(main())
