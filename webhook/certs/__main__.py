"""``python -m webhook.certs`` runs ``preempt-guard certs``."""

import sys

from webhook.certs.command import main

sys.exit(main())
