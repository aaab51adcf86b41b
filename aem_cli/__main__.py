from aem_cli.main import main

raise SystemExit(main())
