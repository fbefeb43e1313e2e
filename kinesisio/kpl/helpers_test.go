package kpl

import (
	"crypto/md5"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// frame wraps a protobuf body into aggregate framing: magic, body, MD5.
func frame(pb []byte) []byte {
	sum := md5.Sum(pb)
	out := append([]byte{}, Magic[:]...)
	out = append(out, pb...)
	return append(out, sum[:]...)
}

// Hand encoders for building bodies field by field, including malformed ones.

func fBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func fVarint(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// rec encodes a Record body with a partition key index and data.
func rec(pk uint64, data string) []byte {
	return fBytes(fVarint(nil, 1, pk), 3, []byte(data))
}

// kplDescriptor is the KPL schema (aggregation-format.md) built at run time,
// so tests can check this package against the reference protobuf runtime.
var kplDescriptor = func() protoreflect.MessageDescriptor {
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	req := descriptorpb.FieldDescriptorProto_LABEL_REQUIRED.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	u64 := descriptorpb.FieldDescriptorProto_TYPE_UINT64.Enum()
	byt := descriptorpb.FieldDescriptorProto_TYPE_BYTES.Enum()
	msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
	field := func(name string, num int32, l *descriptorpb.FieldDescriptorProto_Label, t *descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Label: l, Type: t}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	fd := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("kpl_test.proto"),
		Package: proto.String("kpltest"),
		Syntax:  proto.String("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("AggregatedRecord"), Field: []*descriptorpb.FieldDescriptorProto{
				field("partition_key_table", 1, rep, str, ""),
				field("explicit_hash_key_table", 2, rep, str, ""),
				field("records", 3, rep, msg, ".kpltest.Record"),
			}},
			{Name: proto.String("Tag"), Field: []*descriptorpb.FieldDescriptorProto{
				field("key", 1, req, str, ""),
				field("value", 2, opt, str, ""),
			}},
			{Name: proto.String("Record"), Field: []*descriptorpb.FieldDescriptorProto{
				field("partition_key_index", 1, req, u64, ""),
				field("explicit_hash_key_index", 2, opt, u64, ""),
				field("data", 3, req, byt, ""),
				field("tags", 4, rep, msg, ".kpltest.Tag"),
			}},
		},
	}
	f, err := protodesc.NewFile(fd, nil)
	if err != nil {
		panic(err)
	}
	return f.Messages().ByName("AggregatedRecord")
}()

// referenceParse parses body with the protobuf runtime as a proto2
// AggregatedRecord. ok is false where a proto2 parser (as KCL's) fails.
// Index errors are reported as indexOK=false.
func referenceParse(body []byte) (recs []UserRecord, ok, indexOK bool) {
	m := dynamicpb.NewMessage(kplDescriptor)
	if err := proto.Unmarshal(body, m); err != nil {
		return nil, false, false
	}
	fields := kplDescriptor.Fields()
	pks := m.Get(fields.ByNumber(1)).List()
	ehks := m.Get(fields.ByNumber(2)).List()
	records := m.Get(fields.ByNumber(3)).List()
	recs = []UserRecord{}
	for i := range records.Len() {
		r := records.Get(i).Message()
		rf := r.Descriptor().Fields()
		pk := r.Get(rf.ByNumber(1)).Uint()
		if pk >= uint64(pks.Len()) {
			return nil, true, false
		}
		u := UserRecord{PartitionKey: pks.Get(int(pk)).String(), Data: r.Get(rf.ByNumber(3)).Bytes()}
		if r.Has(rf.ByNumber(2)) {
			ehk := r.Get(rf.ByNumber(2)).Uint()
			if ehk >= uint64(ehks.Len()) {
				return nil, true, false
			}
			u.ExplicitHashKey = ehks.Get(int(ehk)).String()
		}
		recs = append(recs, u)
	}
	return recs, true, true
}

// equalRecords compares user records treating nil and empty data alike.
func equalRecords(t *testing.T, got, want []UserRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.PartitionKey != w.PartitionKey || g.ExplicitHashKey != w.ExplicitHashKey || string(g.Data) != string(w.Data) {
			t.Fatalf("record %d: got {PK %q EHK %q data %q}, want {PK %q EHK %q data %q}",
				i, g.PartitionKey, g.ExplicitHashKey, g.Data, w.PartitionKey, w.ExplicitHashKey, w.Data)
		}
	}
}
