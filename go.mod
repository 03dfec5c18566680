module github.com/MrVSiK/gotry

go 1.25

require (
	go.uber.org/goleak v1.3.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
