from tracekit.command import main

main()
