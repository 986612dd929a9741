from csbench.cli import main

raise SystemExit(main())
