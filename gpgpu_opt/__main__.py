from gpgpu_opt.cli import main

main()
