module posenc.dev/posenc

go 1.19
